package leafid_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	leafid "github.com/leafid/leafid/clients/go"
)

// A client over two servers (the first preferred), ids of one tag and snowflake ids. Compiled,
// not run: it needs servers (see examples/quickstart for a runnable one).
func Example() {
	client, err := leafid.New(leafid.Config{
		Servers:     []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"},
		Batch:       1000,
		WaitTimeout: 3 * time.Second,
	})
	if err != nil {
		log.Fatal(err) // *leafid.ConfigError
	}
	defer client.Close()

	ctx := context.Background()
	id, err := client.NextID(ctx, "orders")
	var rejected *leafid.RejectedError
	var unavailable *leafid.UnavailableError
	switch {
	case errors.As(err, &rejected):
		log.Fatalf("refused: %s", rejected.Code) // e.g. unknown_biz_tag, biz_tag_exhausted
	case errors.As(err, &unavailable):
		log.Fatalf("no ids within %v (last failure: %v)", unavailable.Waited, unavailable.Last)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("order id", id)

	sf, err := client.NextSnowflakeID(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("snowflake id", sf)
}
