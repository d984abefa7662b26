"""Lock the order-lookup case into CI: the agent must never return another user's order.

Record once against the real services, then every CI run replays the cassette (the plugin's
default mode) without calling the model or the order service:

    ORDERS_MODEL_URL=https://models.internal ORDERS_SERVICE_URL=https://orders.internal \
        pytest examples/test_order_agent.py --freezeframe-mode=record
    pytest examples/test_order_agent.py

A change to what the agent sends the model (dropping the filter in ``order_agent.py``, say)
is a replay miss, which fails the test naming the nearest recording and the JSON paths that
differ.
"""

from __future__ import annotations

import os

import pytest
from order_agent import latest_order

MODEL = os.environ.get("ORDERS_MODEL_URL", "https://models.internal")
ORDERS = os.environ.get("ORDERS_SERVICE_URL", "https://orders.internal")


@pytest.mark.freezeframe(cassette="orders-u-1")
def test_the_agent_never_returns_another_users_order(freezeframe):
    answer = latest_order(MODEL, ORDERS, user="u-1")

    assert "ord_8821" in answer, answer  # u-1's own order
    assert "ord_7001" not in answer  # u-17's, which the order service also returns for u-1
    assert [event.method for event in freezeframe.events] == ["POST", "GET", "POST"]
    assert not any(event.method == "DELETE" for event in freezeframe.events)
