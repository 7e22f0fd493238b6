package config

import (
	"fmt"
	"math"
	"strconv"
)

// Price is a target's price_per_hour: what one hour of its hardware costs,
// in the one currency the configuration's author states (docs/metrics.md,
// "Cost"). The cost series of the target derive from it; a target without
// a price exports none.

// ParsePrice reads a price_per_hour given as text (a discovered target's
// __price_per_hour__ label) and checks it as validatePrice does.
func ParsePrice(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("price_per_hour %q is not a number", s)
	}
	if err := checkPrice(v); err != nil {
		return 0, err
	}
	return v, nil
}

// FormatPrice writes p as ParsePrice reads it, exactly.
func FormatPrice(p float64) string { return strconv.FormatFloat(p, 'g', -1, 64) }

// validatePrice checks a target's price_per_hour, when set.
func validatePrice(p *float64) error {
	if p == nil {
		return nil
	}
	return checkPrice(*p)
}

// MinPrice and MaxPrice bound a price_per_hour. Above MaxPrice the fleet's
// cost rules (sums of prices over many targets and hours) can overflow to
// +Inf; below MinPrice the cost of one token, a price divided by seconds and
// tokens, can underflow to exactly 0, which the cost series never show.
const (
	MinPrice = 1e-6
	MaxPrice = 1e6
)

// checkPrice refuses what no hardware costs: a price must be a finite number
// from MinPrice to MaxPrice. A zero price would show every cost as zero,
// which the cost series never do: a target that costs nothing to account
// for has no price_per_hour.
func checkPrice(v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("price_per_hour %v is not a finite number", v)
	case v <= 0:
		return fmt.Errorf("price_per_hour %v must be greater than 0 (leave it unset for a target without a price)", v)
	case v < MinPrice:
		return fmt.Errorf("price_per_hour %v is below the smallest price, %v (its costs would round to 0: state the price in a smaller unit)", v, MinPrice)
	case v > MaxPrice:
		return fmt.Errorf("price_per_hour %v is above the largest price, %v (the fleet's cost sums would overflow: state the price in a larger unit)", v, MaxPrice)
	}
	return nil
}
