package journal

import "context"

// DiscardConnection leaves a transaction open on name's connection and
// then drops the connection as a failed rollback does, so tests can show
// the next use opens a fresh one (a reused connection would refuse the
// next BEGIN: a transaction is still open on it).
func DiscardConnection(ctx context.Context, j *Journal, name string) error {
	fl := j.files[name]
	fl.turn <- struct{}{}
	defer func() { <-fl.turn }()
	if err := fl.connect(ctx); err != nil {
		return err
	}
	if _, err := fl.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	fl.discard(fl.conn)
	return nil
}

// ExecInTx runs stmt inside a transaction of name's file and then fails
// the transaction with fail, as a failing write does.
func ExecInTx(ctx context.Context, j *Journal, name, stmt string, fail error) error {
	release := make(chan struct{})
	close(release)
	return HoldTx(ctx, j, name, stmt, make(chan struct{}), release, fail)
}

// HoldTx runs stmt inside a transaction of name's file, closes started,
// waits for release and then fails the transaction with fail.
func HoldTx(ctx context.Context, j *Journal, name, stmt string, started chan<- struct{}, release <-chan struct{}, fail error) error {
	return j.tx(ctx, name, func(ctx context.Context, fl *file) error {
		if _, err := fl.conn.ExecContext(ctx, stmt); err != nil {
			return err
		}
		close(started)
		<-release
		return fail
	})
}
