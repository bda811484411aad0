package demo

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"
)

// Challenge is one entry of the challenge catalogue.
type Challenge struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	GoalCount int    `json:"goal_count"`
	Reward    Reward `json:"reward"`
}

// Reward is what claiming a challenge gives.
type Reward struct {
	Kind   string `json:"kind"`
	Amount int    `json:"amount"`
}

// Goal is a player's progress towards one challenge.
type Goal struct {
	ChallengeID string `json:"challenge_id"`
	Progress    int    `json:"progress"`
	GoalCount   int    `json:"goal_count"`
	Claimed     bool   `json:"claimed"`
}

// playerState is what the service knows of a player. Values are treated as
// immutable once built: updates make a copy (the cache hands them out).
type playerState struct {
	PlayerID          string
	ActiveChallengeID string // "" when none is set
	Goals             []Goal // in catalogue order
}

func (p playerState) withActive(challengeID string) playerState {
	p.ActiveChallengeID = challengeID
	return p
}

func (p playerState) withClaimed(challengeID string) playerState {
	goals := make([]Goal, len(p.Goals))
	copy(goals, p.Goals)
	for i := range goals {
		if goals[i].ChallengeID == challengeID {
			goals[i].Claimed = true
		}
	}
	p.Goals = goals
	return p
}

func (p playerState) goal(challengeID string) (Goal, bool) {
	for _, g := range p.Goals {
		if g.ChallengeID == challengeID {
			return g, true
		}
	}
	return Goal{}, false
}

// statEvent and loginEvent are validated gRPC events.
type statEvent struct {
	PlayerID string
	Stat     string
	Value    float64
	At       time.Time
}

type loginEvent struct {
	PlayerID  string
	Platform  string
	SessionID string
	At        time.Time
}

// catalogue is the fixed challenge catalogue both databases are seeded with.
// At most 64 entries (the in-memory database keeps claims in a bit set).
var catalogue = []Challenge{
	{ID: "daily-login", Name: "Log in today", GoalCount: 1, Reward: Reward{Kind: "coins", Amount: 50}},
	{ID: "win-3-matches", Name: "Win 3 matches", GoalCount: 3, Reward: Reward{Kind: "coins", Amount: 150}},
	{ID: "play-10-matches", Name: "Play 10 matches", GoalCount: 10, Reward: Reward{Kind: "coins", Amount: 200}},
	{ID: "score-5000", Name: "Score 5000 points", GoalCount: 5000, Reward: Reward{Kind: "gems", Amount: 5}},
	{ID: "collect-20-stars", Name: "Collect 20 stars", GoalCount: 20, Reward: Reward{Kind: "coins", Amount: 120}},
	{ID: "invite-a-friend", Name: "Invite a friend", GoalCount: 1, Reward: Reward{Kind: "gems", Amount: 10}},
	{ID: "weekly-streak", Name: "Play 7 days in a row", GoalCount: 7, Reward: Reward{Kind: "chest", Amount: 1}},
	{ID: "master-tutorial", Name: "Finish the tutorial", GoalCount: 1, Reward: Reward{Kind: "coins", Amount: 25}},
}

var (
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)
	statPattern = regexp.MustCompile(`^[a-z0-9_.]{1,64}$`)
)

// Errors of the store layer; the HTTP and gRPC layers map them to statuses.
var (
	errPlayerNotFound    = errors.New("player not found")
	errChallengeNotFound = errors.New("challenge not found")
	errAlreadyClaimed    = errors.New("reward already claimed")
	// errOverloaded: no database connection could be acquired in time.
	errOverloaded = errors.New("no database connection available within the acquire timeout")
	// errUnavailable: the pool could not open a connection (database down).
	errUnavailable = errors.New("database unavailable")
)

func validateID(what, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%s %q is invalid: want 1-64 characters of [A-Za-z0-9_.:-] starting with a letter or digit", what, id)
	}
	return nil
}

func validateStat(e statEvent) error {
	if err := validateID("player_id", e.PlayerID); err != nil {
		return err
	}
	if !statPattern.MatchString(e.Stat) {
		return fmt.Errorf("stat %q is invalid: want 1-64 characters of [a-z0-9_.]", e.Stat)
	}
	if math.IsNaN(e.Value) || math.IsInf(e.Value, 0) {
		return fmt.Errorf("value %v is invalid: want a finite number", e.Value)
	}
	return nil
}

func validateLogin(e loginEvent) error {
	if err := validateID("player_id", e.PlayerID); err != nil {
		return err
	}
	if len(e.Platform) > 32 {
		return fmt.Errorf("platform %q is too long: want at most 32 bytes", e.Platform)
	}
	if len(e.SessionID) > 64 {
		return fmt.Errorf("session_id %q is too long: want at most 64 bytes", e.SessionID)
	}
	return nil
}

// eventTime turns a client timestamp (ms since epoch, 0 = now) into a time,
// rejecting values more than a day away from now.
func eventTime(ms int64, now time.Time) (time.Time, error) {
	if ms == 0 {
		return now, nil
	}
	t := time.UnixMilli(ms)
	if d := t.Sub(now); d > 24*time.Hour || d < -24*time.Hour {
		return time.Time{}, fmt.Errorf("timestamp_unix_ms %d is invalid: want 0 (now) or a time within 24h of the server clock", ms)
	}
	return t, nil
}
