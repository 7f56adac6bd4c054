// Command quickstart takes a few ids from leafid servers with the Go client.
//
//	go run ./examples/quickstart -servers http://127.0.0.1:8080,http://127.0.0.1:8081 -tag leaf-segment-test
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	leafid "github.com/leafid/leafid/clients/go"
)

func main() {
	servers := flag.String("servers", "http://127.0.0.1:8080", "comma-separated server base URLs, preferred first")
	tag := flag.String("tag", "leaf-segment-test", "biz tag")
	n := flag.Int("n", 5, "ids of each kind to take")
	flag.Parse()

	client, err := leafid.New(leafid.Config{
		Servers:     strings.Split(*servers, ","),
		Batch:       1000,
		WaitTimeout: 3 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	orders, err := client.Segment(*tag)
	if err != nil {
		log.Fatal(err) // an *leafid.InvalidTagError
	}
	for i := 0; i < *n; i++ {
		id, err := orders.NextID(ctx)
		var rejected *leafid.RejectedError
		var unavailable *leafid.UnavailableError
		switch {
		case errors.As(err, &rejected):
			log.Fatalf("refused (%s): %v", rejected.Code, err)
		case errors.As(err, &unavailable):
			log.Fatalf("no ids in time: %v", err)
		case err != nil:
			log.Fatal(err)
		}
		fmt.Printf("%s id: %d\n", *tag, id)
	}
	for i := 0; i < *n; i++ {
		id, err := client.NextSnowflakeID(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("snowflake id: %d\n", id)
	}
	fmt.Printf("stats: %+v\n", client.Stats())
}
