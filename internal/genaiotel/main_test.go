package genaiotel

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its test: the
// periodic reader's and the push's connections end with Shutdown.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
