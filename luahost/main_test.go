package luahost_test

import (
	"os"
	"testing"

	"github.com/rlctl/rlctl/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
