package store

import (
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestWholeMonths(t *testing.T) {
	d := func(y int, m time.Month, day int) int32 { return DayNumber(time.Date(y, m, day, 0, 0, 0, 0, time.UTC)) }
	tests := []struct {
		name           string
		from, to       int32
		wantM0, wantM1 int32
	}{
		{"unbounded", minDay, maxDay, minDay, maxDay},
		{"from a month's first day", d(2025, 1, 1), maxDay, d(2025, 1, 1), maxDay},
		{"from within a month", d(2025, 1, 2), maxDay, d(2025, 2, 1), maxDay},
		{"to a month's first day", minDay, d(2025, 3, 1), minDay, d(2025, 3, 1)},
		{"to within a month", minDay, d(2025, 3, 31), minDay, d(2025, 3, 1)},
		{"within one month", d(2025, 1, 5), d(2025, 1, 25), d(2025, 2, 1), d(2025, 1, 1)},
		{"across a year's end", d(2024, 12, 1), d(2025, 1, 1), d(2024, 12, 1), d(2025, 1, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			m0, m1 := wholeMonths(tt.from, tt.to)
			is.Equal(m0, tt.wantM0) // first whole month
			is.Equal(m1, tt.wantM1) // end of the last whole month
		})
	}
}

func TestSpanParts(t *testing.T) {
	d := func(y int, m time.Month, day int) int32 { return DayNumber(time.Date(y, m, day, 0, 0, 0, 0, time.UTC)) }
	tests := []struct {
		name     string
		from, to int32
		want     []spanPart
	}{
		{"all time", minDay, maxDay, []spanPart{{spanYear, minDay, maxDay}}},
		{"since a day", d(2025, 3, 10), maxDay, []spanPart{
			{spanDay, d(2025, 3, 10), d(2025, 4, 1)}, {spanMonth, d(2025, 4, 1), d(2026, 1, 1)}, {spanDay, d(2026, 1, 1), d(2026, 1, 1)},
			{spanYear, d(2026, 1, 1), maxDay}}},
		{"until a day", minDay, d(2025, 3, 10), []spanPart{
			{spanYear, minDay, d(2025, 1, 1)},
			{spanDay, d(2025, 1, 1), d(2025, 1, 1)}, {spanMonth, d(2025, 1, 1), d(2025, 3, 1)}, {spanDay, d(2025, 3, 1), d(2025, 3, 10)}}},
		{"one day", d(2025, 3, 10), d(2025, 3, 11), []spanPart{{spanDay, d(2025, 3, 10), d(2025, 3, 11)}}},
		{"a week across months", d(2025, 2, 26), d(2025, 3, 5), []spanPart{{spanDay, d(2025, 2, 26), d(2025, 3, 5)}}},
		{"a whole month", d(2025, 2, 1), d(2025, 3, 1), []spanPart{
			{spanDay, d(2025, 2, 1), d(2025, 2, 1)}, {spanMonth, d(2025, 2, 1), d(2025, 3, 1)}, {spanDay, d(2025, 3, 1), d(2025, 3, 1)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(spanParts(tt.from, tt.to), tt.want)
		})
	}
}
