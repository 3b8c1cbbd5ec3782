package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/webhook"
)

// Webhooks is what the API needs of the webhook room (sagas/webhook's
// Service satisfies it); nil serves no webhook routes.
type Webhooks interface {
	Register(ctx context.Context, in webhook.RegisterInput) (webhook.View, error)
	List(ctx context.Context) ([]aggregate.Webhook, error)
	Delete(ctx context.Context, id, by string) (aggregate.Webhook, error)
	Deliveries(ctx context.Context, id string, limit int, before uint64) ([]webhook.Delivery, uint64, error)
}

// Webhook command names. Every webhook route, reads included, is an
// operator's: URLs and delivery records span every account.
const (
	cmdWebhookCreate     = "webhook.create"
	cmdWebhookList       = "webhook.list"
	cmdWebhookDelete     = "webhook.delete"
	cmdWebhookDeliveries = "webhook.deliveries"
)

// webhookBody is POST /v1/webhooks.
type webhookBody struct {
	URL      string   `json:"url"`
	Events   []string `json:"events"`
	Accounts []string `json:"accounts"`
}

// WebhookList is GET /v1/webhooks.
type WebhookList struct {
	Webhooks []webhook.View `json:"webhooks"`
}

// DeliveryList is GET /v1/webhooks/{id}/deliveries: a page, newest first,
// and the cursor of the next one (null on the last page).
type DeliveryList struct {
	Deliveries []webhook.Delivery `json:"deliveries"`
	NextCursor *string            `json:"next_cursor"`
}

func (a *httpAPI) webhookRoutes(hooks Webhooks) {
	if hooks == nil {
		return
	}
	a.handle("POST", "/v1/webhooks", cmdWebhookCreate, true, func(ctx context.Context, p Principal, _ *http.Request, body []byte) (result, error) {
		var in webhookBody
		if err := decodeStrict(body, &in); err != nil {
			return result{}, err
		}
		if in.Events == nil {
			in.Events = []string{aggregate.WebhookEventStateChanged}
		}
		v, err := hooks.Register(ctx, webhook.RegisterInput{URL: in.URL, Events: in.Events, Accounts: in.Accounts, By: p.Name})
		if err != nil {
			return result{}, err
		}
		return result{created: true, body: v}, nil
	})
	a.handle("GET", "/v1/webhooks", cmdWebhookList, false, func(ctx context.Context, _ Principal, _ *http.Request, _ []byte) (result, error) {
		return webhookList(ctx, hooks)
	})
	a.handle("DELETE", "/v1/webhooks/{id}", cmdWebhookDelete, false, func(ctx context.Context, p Principal, r *http.Request, _ []byte) (result, error) {
		h, err := hooks.Delete(ctx, r.PathValue("id"), p.Name)
		if err != nil {
			return result{}, err
		}
		return result{body: webhook.ViewOf(h)}, nil
	})
	a.handle("GET", "/v1/webhooks/{id}/deliveries", cmdWebhookDeliveries, false, func(ctx context.Context, _ Principal, r *http.Request, _ []byte) (result, error) {
		page, err := pageQuery(r)
		if err != nil {
			return result{}, err
		}
		return webhookDeliveries(ctx, hooks, r.PathValue("id"), page)
	})
}

// errNoWebhooks: this process serves no webhook room (the HTTP API has no
// webhook routes then).
func errNoWebhooks() error {
	return apiError(CodeNotFound, "", "webhooks are not served by this process")
}

// webhookList is GET /v1/webhooks (and the console's webhooks page).
func webhookList(ctx context.Context, hooks Webhooks) (result, error) {
	if hooks == nil {
		return result{}, errNoWebhooks()
	}
	hs, err := hooks.List(ctx)
	if err != nil {
		return result{}, err
	}
	out := WebhookList{Webhooks: make([]webhook.View, len(hs))}
	for i, h := range hs {
		out.Webhooks[i] = webhook.ViewOf(h)
	}
	return result{body: out}, nil
}

// webhookDeliveries is GET /v1/webhooks/{id}/deliveries: at most
// page.Limit (default DefaultPageLimit, 1 to MaxPageLimit) deliveries,
// newest first, older than page.Cursor (the next_cursor of the page
// before: a WEIR_NOTIFY sequence).
func webhookDeliveries(ctx context.Context, hooks Webhooks, id string, page Page) (result, error) {
	if hooks == nil {
		return result{}, errNoWebhooks()
	}
	limit, err := pageLimit(page.Limit)
	if err != nil {
		return result{}, err
	}
	before, err := seqCursor(page.Cursor)
	if err != nil {
		return result{}, err
	}
	ds, next, err := hooks.Deliveries(ctx, id, limit, before)
	if err != nil {
		return result{}, err
	}
	body := DeliveryList{Deliveries: ds}
	if next > 0 {
		c := strconv.FormatUint(next, 10)
		body.NextCursor = &c
	}
	return result{body: body}, nil
}
