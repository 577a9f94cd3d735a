package database

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// CreatePostgres creates the empty PostgreSQL database name on the server
// of adminURL (a postgres:// URL of a role that may create databases) and
// returns its URL (adminURL with the path /name) and drop, which removes it
// with every connection to it (DROP DATABASE … WITH (FORCE)). The tests'
// fresh databases (dbtest) and the demo's Git host use it. Errors wrap the
// connection's or the server's; an existing database of that name is an
// error.
func CreatePostgres(ctx context.Context, adminURL, name string) (string, func(context.Context) error, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("parse the server URL: %w", err)
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func(ctx context.Context) error { return DropPostgres(ctx, adminURL, name) }
	u.Path = "/" + name
	return u.String(), drop, nil
}

// DropPostgres removes the PostgreSQL database name from the server of
// adminURL, if it exists, with every connection to it (DROP DATABASE IF
// EXISTS … WITH (FORCE)). Errors wrap the connection's or the server's.
func DropPostgres(ctx context.Context, adminURL, name string) error {
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}
