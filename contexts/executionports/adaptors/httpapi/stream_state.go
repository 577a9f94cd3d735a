package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

type stateOutput struct {
	Body siteprotocol.StreamState
}

func (h *Handlers) getStreamStateOperation() huma.Operation {
	return h.siteOperation(huma.Operation{
		OperationID: "get-stream-state", Method: http.MethodGet, Path: "/site/v1/streams/{environment}",
		Summary:     "Read a stream's state",
		Description: "The environment, its Site, authority and backend (a Runtime configured for another backend stops with backend-mismatch before it executes anything), the acknowledged and head sequences and the bound installation. `metallo runtime check` reads it; it never binds the stream.",
	}, siteReadReasons())
}

// getStreamState answers the stream's state for the installation of the
// request (fenced, never binding).
func (h *Handlers) getStreamState(ctx context.Context, in *SiteRequest) (*stateOutput, error) {
	if err := requireInstallation(in); err != nil {
		return nil, err
	}
	env, st, err := h.Streams.State(ctx, in.Environment, in.Installation)
	if err != nil {
		return nil, h.problem(ctx, err, "")
	}
	return &stateOutput{Body: stateBody(env, st)}, nil
}

func stateBody(env domain.Environment, st domain.StreamState) siteprotocol.StreamState {
	return siteprotocol.StreamState{
		Environment: env.ID, Site: env.Site, Authority: env.Authority, Backend: env.ProtocolBackend(),
		AcknowledgedSequence: st.AcknowledgedSequence, HeadSequence: st.HeadSequence, InstallationID: st.InstallationID,
	}
}
