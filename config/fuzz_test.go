package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: the loader never panics on any input, and a configuration it
// accepts renders (String, the /config page) to YAML that it accepts again
// and that renders the same: nothing the loader accepts is lost or changed by
// a render, and secrets render as "<secret>" both times.
func FuzzLoad(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.yml"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seed configurations: %v", err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Load(data, "testdata")
		if err != nil {
			return
		}
		first := cfg.String()
		// Relative paths were resolved against testdata at the first load.
		again, err := Load([]byte(first), ".")
		if err != nil {
			t.Fatalf("the rendered configuration does not load: %v\n%s", err, first)
		}
		if second := again.String(); second != first {
			t.Fatalf("render changed on reload:\n%s\nthen\n%s", first, second)
		}
	})
}
