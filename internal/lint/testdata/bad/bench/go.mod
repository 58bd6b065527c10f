module github.com/herald-mq/herald/bench
