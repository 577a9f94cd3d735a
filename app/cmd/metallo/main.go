// Command metallo is the one Metallo binary: `metallo serve --role …` and its
// operator commands. See the README and docs/architecture.md.
package main

import (
	"context"
	"os"

	"github.com/pharos-metallo/metallo/app"
)

func main() {
	os.Exit(app.Main(context.Background(), os.Args[1:], app.Env{
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		LookupEnv: os.LookupEnv,
	}))
}
