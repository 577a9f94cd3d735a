package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgxlisten"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
)

// Listener LISTENs on Channel over its own connection (never one of the
// pool's) and wakes the waiting pulls of this process when any server
// process appends to a stream. After every (re)connection it wakes every
// waiter, since notifications sent while it was disconnected are lost;
// waiting pulls also re-read on their own (application.DefaultRecheck).
type Listener struct {
	listener *pgxlisten.Listener
}

// NewListener returns a listener on pool's database that notifies wake.
// logError receives connection failures (the listener reconnects after
// reconnectDelay).
func NewListener(pool *pgxpool.Pool, wake *application.Wakeups, reconnectDelay time.Duration, logError func(error)) *Listener {
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			return database.ConnectOutsidePool(ctx, pool)
		},
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil { // not the process stopping
				logError(err)
			}
		},
		ReconnectDelay: reconnectDelay,
	}
	l.Handle(Channel, wakeHandler{wake: wake})
	return &Listener{listener: l}
}

// Run listens until ctx ends; it returns ctx's error.
func (l *Listener) Run(ctx context.Context) error { return l.listener.Listen(ctx) }

type wakeHandler struct{ wake *application.Wakeups }

// HandleNotification wakes the pulls of the notified environment.
func (h wakeHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	h.wake.Notify(n.Payload)
	return nil
}

// HandleBacklog wakes every pull once listening (re)starts.
func (h wakeHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.wake.NotifyAll()
	return nil
}
