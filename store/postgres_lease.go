package store

import "github.com/jackc/pgx/v5"

// pgCharges is the ledger's charge counter on PostgreSQL: a charge is
// counted against the instance's lease of its account and key.
type pgCharges struct{ p *Postgres }

func (c pgCharges) record(r *genRow)   {}
func (c pgCharges) unrecord(r *genRow) {}

// queueLeaseCharges queues, in a ledger batch, the charges taken off the
// leases they were made against (lease id → micro-dollars).
func queueLeaseCharges(b *pgx.Batch, charges map[int64]int64) {
	ids := make([]int64, 0, len(charges))
	amounts := make([]int64, 0, len(charges))
	for id, c := range charges {
		ids = append(ids, id)
		amounts = append(amounts, c)
	}
	b.Queue(`UPDATE leases l SET held_micros = GREATEST(l.held_micros - c.amount, 0)
		FROM unnest($1::bigint[], $2::bigint[]) AS c(id, amount) WHERE l.id = c.id`, ids, amounts)
}
