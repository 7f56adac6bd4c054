module github.com/leafid/leafid/clients/go

go 1.19
