package store

// The usage feed: what each ledger commit adds to the usage roll-ups, told
// to whoever keeps usage answers (the account endpoints' answer cache), so
// that an answer computed once can be kept exact across commits by adding
// each commit's sums to it instead of being computed again. Only the SQLite
// store has it: its serve lock makes this process's ledger writer the only
// one that adds to the roll-ups, so its commits are every change there is,
// whereas on PostgreSQL other instances commit too, unseen.
//
// Two things make a kept answer exact. FollowUsage hands each commit's sums
// to the followers on the writer's goroutine once the commit has succeeded
// and before any Sync waiting for it returns, so a read after its Sync finds
// the commit told. ReadUsage tells a usage read which commit's state it saw:
// a count that is odd while a COMMIT is in flight brackets the read (a
// seqlock), so a read that no COMMIT overlapped saw exactly the commits told
// before it, and its answer plus the sums of every later commit is the
// answer at each later commit.

// UsageDelta is what one commit added to the roll-ups of one (account, key,
// application, request type, UTC day): the usage_daily row every grouping
// of /usage derives from.
type UsageDelta struct {
	AccountID   int64
	Day         int32  // days since 1970-01-01, UTC (see UsageQuery.Days)
	KeyID       string // "" for generations without a key
	Application string
	RequestType string

	Requests          int64
	InputTokens       int64 // cached and cache-write ones included
	OutputTokens      int64 // reasoning ones included
	CachedInputTokens int64
	CacheWriteTokens  int64
	ReasoningTokens   int64
	CostMicros        int64
}

// UsageCommit is one ledger commit as the usage feed tells it.
type UsageCommit struct {
	// Seq numbers the commits told since Open, from 1, without gaps: a
	// follower that has seen Seq-1 has seen every commit before this one.
	Seq uint64
	// Deltas are the commit's roll-up sums, one per usage_daily row it
	// added to, in no particular order. Followers must not modify them.
	Deltas []UsageDelta
	// Lost is set when the commit's outcome is unknown (its COMMIT
	// reported a failure, which may still have taken effect): answers
	// kept from before it can no longer be brought up to date and must
	// be dropped. Deltas is empty then.
	Lost bool
}
