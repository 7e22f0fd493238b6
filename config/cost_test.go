package config

import (
	"math"
	"strings"
	"testing"
)

const priceModules = `
modules:
  c:
    prober: completions
    prompt: "Say hello."
`

func TestPricePerHour(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, err string
		want            float64 // of the target, or of target_defaults; 0: unset
	}{
		{"target", "targets:\n  - name: sim\n    url: http://127.0.0.1:8000\n    price_per_hour: 2.5\n", "", 2.5},
		{"unset", "targets:\n  - name: sim\n    url: http://127.0.0.1:8000\n", "", 0},
		{"defaults", "file_sd_configs: [{files: [x.json]}]\ntarget_defaults:\n  price_per_hour: 4.1\n", "", 4.1},
		{"negative", "targets:\n  - name: sim\n    url: http://127.0.0.1:8000\n    price_per_hour: -1\n",
			`target "sim": price_per_hour -1 must be greater than 0 (leave it unset for a target without a price)`, 0},
		{"zero", "targets:\n  - name: sim\n    url: http://127.0.0.1:8000\n    price_per_hour: 0\n",
			`target "sim": price_per_hour 0 must be greater than 0`, 0},
		{"nan", "targets:\n  - name: sim\n    url: http://127.0.0.1:8000\n    price_per_hour: .nan\n",
			`target "sim": price_per_hour NaN is not a finite number`, 0},
		{"inf", "targets:\n  - name: sim\n    url: http://127.0.0.1:8000\n    price_per_hour: .inf\n",
			`target "sim": price_per_hour +Inf is not a finite number`, 0},
		{"text", "targets:\n  - name: sim\n    url: http://127.0.0.1:8000\n    price_per_hour: cheap\n",
			"cannot unmarshal !!str `cheap` into a number", 0},
		{"huge", "targets:\n  - name: sim\n    url: http://127.0.0.1:8000\n    price_per_hour: 1e308\n",
			`target "sim": price_per_hour 1e+308 is above the largest price, 1e+06`, 0},
		{"tiny", "targets:\n  - name: sim\n    url: http://127.0.0.1:8000\n    price_per_hour: 5e-324\n",
			`target "sim": price_per_hour 5e-324 is below the smallest price, 1e-06`, 0},
		{"defaults negative", "file_sd_configs: [{files: [x.json]}]\ntarget_defaults:\n  price_per_hour: -3\n",
			"target_defaults: price_per_hour -3 must be greater than 0", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load([]byte(priceModules+tc.yaml), "")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := c.Discovery.TargetDefaults
			if len(c.Targets) > 0 {
				p = &c.Targets[0]
			}
			switch {
			case tc.want == 0 && p.PricePerHour != nil:
				t.Errorf("price %v, want none", *p.PricePerHour)
			case tc.want != 0 && (p.PricePerHour == nil || *p.PricePerHour != tc.want):
				t.Errorf("price %v, want %v", p.PricePerHour, tc.want)
			}
		})
	}
}

func TestParsePrice(t *testing.T) {
	for in, want := range map[string]string{
		"2.5":    "",
		"1e1":    "",
		"0":      `price_per_hour 0 must be greater than 0`,
		"-2":     `price_per_hour -2 must be greater than 0`,
		"NaN":    `price_per_hour NaN is not a finite number`,
		"+Inf":   `price_per_hour +Inf is not a finite number`,
		"$2.50":  `price_per_hour "$2.50" is not a number`,
		"1e308":  `price_per_hour 1e+308 is above the largest price, 1e+06`,
		"1e+06":  "",
		"5e-324": `price_per_hour 5e-324 is below the smallest price, 1e-06`,
		"1e-06":  "",
		"":       `price_per_hour "" is not a number`,
	} {
		v, err := ParsePrice(in)
		switch {
		case want == "" && err != nil:
			t.Errorf("ParsePrice(%q): %v", in, err)
		case want == "" && (FormatPrice(v) != in && v != 10):
			t.Errorf("ParsePrice(%q) = %v", in, v)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("ParsePrice(%q): error %v, want %q", in, err, want)
		}
	}
	if v, _ := ParsePrice(FormatPrice(math.Pi)); v != math.Pi {
		t.Errorf("FormatPrice does not round-trip: %v", v)
	}
}
