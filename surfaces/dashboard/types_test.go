package dashboard

import (
	"io/fs"
	"path"
	"testing"
)

// Every embedded file has its media type in contentTypes: a file added
// with another extension would otherwise go out as application/octet-stream
// (with nosniff, a browser would not run or apply it).
func TestContentTypes_CoverTheEmbeddedFiles(t *testing.T) {
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if _, ok := contentTypes[path.Ext(p)]; !ok {
			t.Errorf("%s: no media type for %q in contentTypes", p, path.Ext(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
