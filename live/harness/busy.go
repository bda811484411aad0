package harness

import (
	"runtime"
	"sync"
	"time"
)

// busyPeriod is the neighbour's cycle: it spins for Busy of each period and
// sleeps for the rest, so that the scheduler interleaves it with k6 and the
// service at the scale of their requests (a few ms), as a second job on a
// shared CI runner does.
const busyPeriod = 10 * time.Millisecond

// startNeighbour keeps one OS thread busy for share (0-1) of every
// busyPeriod until stop is called or limit has passed (every load loop is
// bounded in time). It is the "busy 2-core machine" of the cases named
// .../open-busy: a constant CPU demand beside k6 and the service, started
// before the service so that its cold start shares the cores too.
func startNeighbour(share float64, limit time.Duration) (stop func()) {
	if share <= 0 {
		return func() {}
	}
	if share > 1 {
		share = 1
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		spin := time.Duration(share * float64(busyPeriod))
		end := time.Now().Add(limit)
		var sink uint64
		for time.Now().Before(end) {
			select {
			case <-quit:
				return
			default:
			}
			t0 := time.Now()
			for time.Since(t0) < spin {
				for i := 0; i < 1000; i++ {
					sink = sink*6364136223846793005 + 1442695040888963407
				}
			}
			if rest := busyPeriod - time.Since(t0); rest > 0 {
				time.Sleep(rest)
			}
		}
		_ = sink
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); wg.Wait() }) }
}
