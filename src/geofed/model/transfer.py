"""Bulk transfer between two sites over parallel TCP streams.

New connections (one handshake round trip), slow start up to the bandwidth-delay
product, then the link's rate, or Mathis' limit per stream when the link loses
frames (rate = MSS / RTT x sqrt(3/2) / sqrt(loss)), so more streams help exactly
when the link is lossy or the window is limited.
"""

from __future__ import annotations

from geofed.model import Model, Prediction, prediction
from geofed.model.network import fresh_stream_s, route
from geofed.records.transfer import TransferParams


class Transfer(Model, name="transfer", measured_unit="s", Params=TransferParams, needs_calibration=False):
    """bulk data transfer from the placement's first site to its last (parallel TCP streams)"""

    def predict(self, fed, cal, placement, nodes, params) -> Prediction:
        a, b = nodes[0].site, nodes[-1].site
        t = fresh_stream_s(fed, cal, a, b, params.bytes, params.streams)
        crosses = route(fed, a, b).crosses_link
        return prediction(self.name, placement, link_comm=t if crosses else 0.0, local_comm=0.0 if crosses else t,
                          link_bytes=params.bytes if crosses else 0.0)


MODELS = (Transfer(),)
