#!/usr/bin/env python3
"""A fake YARN ResourceManager for the end-to-end test: answers the RM REST API's application list
with one RUNNING "Apache Flink" application whose registered address (amRPCAddress) is a real
Flink cluster's REST endpoint, as Flink registers it on YARN.

    e2e/fake_rm.py --port PORT --am-address 127.0.0.1:18083 [--app-id application_1_0001]

Only GET /ws/v1/cluster/apps (with the states/applicationTypes filters) is served; every other
path answers 404. Binds 127.0.0.1 only.
"""
import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--am-address", required=True)
    parser.add_argument("--app-id", default="application_1700000000000_0001")
    args = parser.parse_args()

    app = {
        "id": args.app_id,
        "name": "Flink session cluster",
        "state": "RUNNING",
        "finalStatus": "UNDEFINED",
        "applicationType": "Apache Flink",
        "trackingUrl": f"http://127.0.0.1:{args.port}/proxy/{args.app_id}/",
        "amRPCAddress": args.am_address,
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlparse(self.path)
            if url.path != "/ws/v1/cluster/apps":
                self.send_error(404)
                return
            query = parse_qs(url.query)
            states = ",".join(query.get("states", ["RUNNING"])).upper().split(",")
            types = ",".join(query.get("applicationTypes", ["Apache Flink"])).split(",")
            apps = [app] if "RUNNING" in states and "Apache Flink" in types else []
            body = json.dumps({"apps": {"app": apps} if apps else None}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *log_args):
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
