package demo

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/xk6-regime/xk6-regime/demo/eventspb"
)

// startGRPC serves svc's gRPC server on a real 127.0.0.1 listener.
func startGRPC(tb testing.TB, svc *service) *grpc.ClientConn {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	go svc.grpc.Serve(ln)
	tb.Cleanup(svc.grpc.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(tb, err)
	tb.Cleanup(func() { cc.Close() })
	return cc
}

func TestGRPCRoundTrip(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	svc, _ := newTestServer(t, cfg, newTestMemDB(t, cfg, noSleep))
	client := eventspb.NewEventIngestClient(startGRPC(t, svc))
	ctx := t.Context()
	now := time.Now().UnixMilli()

	cases := []struct {
		name     string
		call     func() (*eventspb.Ack, error)
		wantCode codes.Code
	}{
		{"stat", func() (*eventspb.Ack, error) {
			return client.SendStat(ctx, &eventspb.StatEvent{PlayerId: "p1", Stat: "matches_won", Value: 1, TimestampUnixMs: now})
		}, codes.OK},
		{"stat now", func() (*eventspb.Ack, error) {
			return client.SendStat(ctx, &eventspb.StatEvent{PlayerId: "p1", Stat: "score", Value: 1200})
		}, codes.OK},
		{"login", func() (*eventspb.Ack, error) {
			return client.SendLogin(ctx, &eventspb.LoginEvent{PlayerId: "p1", Platform: "ios", SessionId: "s-1"})
		}, codes.OK},
		{"stat bad player", func() (*eventspb.Ack, error) {
			return client.SendStat(ctx, &eventspb.StatEvent{PlayerId: "", Stat: "score", Value: 1})
		}, codes.InvalidArgument},
		{"stat bad name", func() (*eventspb.Ack, error) {
			return client.SendStat(ctx, &eventspb.StatEvent{PlayerId: "p1", Stat: "Score!", Value: 1})
		}, codes.InvalidArgument},
		{"stat NaN", func() (*eventspb.Ack, error) {
			return client.SendStat(ctx, &eventspb.StatEvent{PlayerId: "p1", Stat: "score", Value: math.NaN()})
		}, codes.InvalidArgument},
		{"stat far future", func() (*eventspb.Ack, error) {
			return client.SendStat(ctx, &eventspb.StatEvent{PlayerId: "p1", Stat: "score", TimestampUnixMs: now + 48*3600*1000})
		}, codes.InvalidArgument},
		{"login long platform", func() (*eventspb.Ack, error) {
			return client.SendLogin(ctx, &eventspb.LoginEvent{PlayerId: "p1", Platform: string(make([]byte, 33))})
		}, codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ack, err := tc.call()
			require.Equal(t, tc.wantCode, status.Code(err), "%v", err)
			if tc.wantCode == codes.OK {
				require.Positive(t, ack.GetEventId())
				require.InDelta(t, time.Now().UnixMilli(), ack.GetReceivedUnixMs(), 60_000)
			}
		})
	}
}

func TestGRPCOverloadIsUnavailable(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.PoolMax = 1
	cfg.AcquireTimeout = 20 * time.Millisecond
	db := newTestMemDB(t, cfg, noSleep)
	svc, _ := newTestServer(t, cfg, db)
	client := eventspb.NewEventIngestClient(startGRPC(t, svc))
	held, err := db.pool.Acquire(t.Context())
	require.NoError(t, err)
	start := time.Now()
	_, err = client.SendLogin(t.Context(), &eventspb.LoginEvent{PlayerId: "p1"})
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	require.Less(t, time.Since(start), time.Second)
	held.Release()
	_, err = client.SendLogin(t.Context(), &eventspb.LoginEvent{PlayerId: "p1"})
	require.NoError(t, err)

	snap := svc.api.metrics.grpc.snapshot()
	got := map[string]uint64{}
	for _, c := range snap.counts {
		got[c.op+" "+c.code] = c.n
	}
	require.Equal(t, map[string]uint64{
		"/events.v1.EventIngest/SendLogin Unavailable": 1,
		"/events.v1.EventIngest/SendLogin OK":          1,
	}, got)
}

func TestGRPCReflectionListsService(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	svc, _ := newTestServer(t, cfg, newTestMemDB(t, cfg, noSleep))
	cc := startGRPC(t, svc)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}))
	res, err := stream.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	require.Contains(t, names, "events.v1.EventIngest")
}
