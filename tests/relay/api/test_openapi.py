"""
C{docs/openapi.json} against the API's route table
(L{nfltr.relay.api.ROUTES}) and C{docs/api.md}: every route documented,
every documented route served, the same path parameters, the refusals
every route can give listed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.api import ROUTES

DOCS = Path(__file__).resolve().parents[3] / "docs"


def load() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((DOCS / "openapi.json").read_text())
    return document


class OpenAPITests(SynchronousTestCase):
    """
    The OpenAPI document is the route table.
    """

    def test_sameRoutes(self) -> None:
        """
        The document's operations are exactly the routes, each with the
        route's summary and change flag.
        """
        document = load()
        documented = {(method.upper(), path) for path, ops in document["paths"].items()
                      for method in ops}
        served = {(r.method, r.template) for r in ROUTES}
        self.assertEqual(documented - served, set(), "documented, not served")
        self.assertEqual(served - documented, set(), "served, not documented")
        for route in ROUTES:
            op = document["paths"][route.template][route.method.lower()]
            self.assertEqual(op["summary"], route.summary, route.template)
            self.assertEqual(op["x-nfltr-change"], route.change, route.template)

    def test_parametersAndRefusals(self) -> None:
        """
        Each path parameter is declared; every operation lists 401 and 429,
        and every change 403.
        """
        document = load()
        for route in ROUTES:
            op = document["paths"][route.template][route.method.lower()]
            names = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            self.assertEqual(names, set(re.findall(r"\{(\w+)\}", route.template)))
            for code in ("401", "429"):
                self.assertIn(code, op["responses"], route.template)
            if route.change:
                self.assertIn("403", op["responses"], route.template)

    def test_apiPageNamesEveryRoute(self) -> None:
        """
        C{docs/api.md} names every route (C{METHOD /path}).
        """
        page = (DOCS / "api.md").read_text()
        for route in ROUTES:
            self.assertIn(f"`{route.method} {route.template}`", page)
