package demo

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/xk6-regime/xk6-regime/demo/eventspb"
)

// eventIngest implements events.v1.EventIngest: it validates an event and
// writes it to the database through the same pool as the HTTP API.
type eventIngest struct {
	eventspb.UnimplementedEventIngestServer
	db  database
	log *slog.Logger
	now func() time.Time
}

var _ eventspb.EventIngestServer = (*eventIngest)(nil)

func (s *eventIngest) SendStat(ctx context.Context, in *eventspb.StatEvent) (*eventspb.Ack, error) {
	now := s.now()
	at, err := eventTime(in.GetTimestampUnixMs(), now)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	e := statEvent{PlayerID: in.GetPlayerId(), Stat: in.GetStat(), Value: in.GetValue(), At: at}
	if err := validateStat(e); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	id, err := s.db.insertStat(ctx, e)
	if err != nil {
		return nil, s.fail(err)
	}
	return &eventspb.Ack{EventId: id, ReceivedUnixMs: s.now().UnixMilli()}, nil
}

func (s *eventIngest) SendLogin(ctx context.Context, in *eventspb.LoginEvent) (*eventspb.Ack, error) {
	now := s.now()
	at, err := eventTime(in.GetTimestampUnixMs(), now)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	e := loginEvent{PlayerID: in.GetPlayerId(), Platform: in.GetPlatform(), SessionID: in.GetSessionId(), At: at}
	if err := validateLogin(e); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	id, err := s.db.insertLogin(ctx, e)
	if err != nil {
		return nil, s.fail(err)
	}
	return &eventspb.Ack{EventId: id, ReceivedUnixMs: s.now().UnixMilli()}, nil
}

func (s *eventIngest) fail(err error) error {
	switch {
	case errors.Is(err, errOverloaded), errors.Is(err, errUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	default:
		s.log.Error("event write failed", "err", err)
		return status.Error(codes.Internal, "internal error")
	}
}

// newGRPCServer returns a server with EventIngest and reflection registered
// and every call counted in m.
func newGRPCServer(ingest *eventIngest, m *requestMetrics) *grpc.Server {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := ingest.now()
		resp, err := handler(ctx, req)
		m.observe("", info.FullMethod, status.Code(err).String(), ingest.now().Sub(start))
		return resp, err
	}))
	eventspb.RegisterEventIngestServer(srv, ingest)
	reflection.Register(srv)
	return srv
}
