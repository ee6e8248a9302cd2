package store

import "errors"

// Sentinel errors. Methods wrap them with context; test with errors.Is.
var (
	// ErrNotFound means the row does not exist, or belongs to another account.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the request conflicts with the row's state, such as
	// feedback on a generation older than the allowed age.
	ErrConflict = errors.New("conflict")
	// ErrInvalid means an argument was rejected, such as a non-positive
	// credit amount, a bad name, or money with more than six decimals.
	ErrInvalid = errors.New("invalid")
	// ErrClosed means the database has been closed.
	ErrClosed = errors.New("store closed")
	// ErrUnavailable means the database cannot serve the request now: the
	// ledger cannot record generations (see CheckLedger), or a read did not
	// answer within QueryTimeout or found the database locked. Retrying
	// later may succeed.
	ErrUnavailable = errors.New("database unavailable")
	// ErrLimit means a bound on stored rows was reached, such as the end
	// users that may rate one generation.
	ErrLimit = errors.New("limit reached")
	// ErrNoDatabase means Options.Existing was set and svcgw has not
	// created a database there: no SQLite file, or no svcgw schema in the
	// PostgreSQL database.
	ErrNoDatabase = errors.New("no svcgw database")
)
