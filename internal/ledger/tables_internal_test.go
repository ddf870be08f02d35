package ledger

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// A registered table's migration files are NNNN_words.sql numbered from 1, applied in number order;
// a file otherwise named, or two of one number, is an error naming the table and the file, and a
// refusal (it fails again however often retried, so edgeq does not start with it).
func TestTableMigrations_NumberOrderAndMisnamedFiles(t *testing.T) {
	files := func(names ...string) fstest.MapFS {
		m := fstest.MapFS{"README.md": {Data: []byte("x")}, "sub/0009_nested.sql": {Data: []byte("x")}}
		for _, n := range names {
			m[n] = &fstest.MapFile{Data: []byte("SELECT '" + n + "'")}
		}
		return m
	}
	steps, err := tableMigrations(Table{Name: "raffle", Migrations: files("10_c.sql", "2_b.sql", "0001_a.sql")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range steps {
		got = append(got, s.file)
		if s.sql != "SELECT '"+s.file+"'" {
			t.Errorf("%s: sql %q", s.file, s.sql)
		}
	}
	if want := []string{"0001_a.sql", "2_b.sql", "10_c.sql"}; !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
	for _, bad := range [][]string{
		{"tickets.sql"}, {"0001.sql"}, {"00x1_a.sql"}, {"+1_a.sql"}, {"-1_a.sql"}, {"0000_zero.sql"}, {"_a.sql"},
		{"0002_a.sql", "2_b.sql"},
	} {
		_, err := tableMigrations(Table{Name: "raffle", Migrations: files(bad...)})
		if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "raffle") || !strings.Contains(err.Error(), bad[len(bad)-1]) {
			t.Errorf("files %q: %v; want an error naming the table and the file, a refusal", bad, err)
		}
	}
	if steps, err := tableMigrations(Table{Name: "raffle"}); err != nil || len(steps) != 0 {
		t.Errorf("no migrations: %v %v", steps, err)
	}
}
