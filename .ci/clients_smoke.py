"""Drives a running Hookline with the Python client generated from docs/openapi.json
(.ci/clients): the calls a producer and an on-call engineer make, typed, and a
problem answer parsed as the document says. Fails loudly on any mismatch."""
import sys
import time

from hookline_client import AuthenticatedClient
from hookline_client.api.apps import post_v1_apps
from hookline_client.api.endpoints import post_v1_apps_app_endpoints, get_v1_apps_app_endpoints_endpoint_stats
from hookline_client.api.events import post_v1_apps_app_events, get_v1_apps_app_events_event, get_v1_apps_app_events
from hookline_client.api.deliveries import get_v1_apps_app_deliveries_delivery
from hookline_client.models import (
    AppView, CreateApp, CreateEndpoint, EndpointView, EventView, Problem, PublishRequest, PublishedView,
)

port, token = sys.argv[1], sys.argv[2]
client = AuthenticatedClient(base_url=f"http://127.0.0.1:{port}", token=token, raise_on_unexpected_status=True)

app = post_v1_apps.sync(client=client, body=CreateApp(name="generated-client"))
assert isinstance(app, AppView), app
# Deliveries to this server's own /healthz answer 405: dead at once.
endpoint = post_v1_apps_app_endpoints.sync(
    app.id, client=client,
    body=CreateEndpoint(url=f"http://127.0.0.1:{port}/healthz", filter_="/amount > 1"),
)
assert isinstance(endpoint, EndpointView), endpoint
assert endpoint.filter_ == "/amount > 1", endpoint.filter_

published = post_v1_apps_app_events.sync(
    app.id, client=client,
    body=PublishRequest(event_type="order.paid", payload={"amount": 5}),
)
assert isinstance(published, PublishedView), published
assert len(published.deliveries) == 1, published.deliveries
event = get_v1_apps_app_events_event.sync(app.id, published.id, client=client)
assert isinstance(event, EventView) and event.event_type == "order.paid", event

for _ in range(100):
    delivery = get_v1_apps_app_deliveries_delivery.sync(app.id, published.deliveries[0].id, client=client)
    if delivery.state.value == "dead":
        break
    time.sleep(0.1)
else:
    sys.exit("the delivery never went to the DLQ")

listed = get_v1_apps_app_events.sync(app.id, client=client, limit=10)
assert [e.id for e in listed.data] == [published.id], listed
stats = get_v1_apps_app_endpoints_endpoint_stats.sync(app.id, endpoint.id, client=client)
assert stats.deliveries["dead"] == 1, stats
assert stats.dlq_by_reason["client_error"] == 1, stats
assert stats.windows["hour"].attempts == 1, stats

missing = get_v1_apps_app_events_event.sync(app.id, "msg_01J00000000000000000000000", client=client)
assert isinstance(missing, Problem) and missing.code == "not_found", missing
print("generated Python client: ok")
