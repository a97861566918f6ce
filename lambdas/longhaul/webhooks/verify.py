"""The reference verifier as a command: check one received delivery (body on stdin or from a file).

    PYTHONPATH=lambdas .venv/bin/python -m longhaul.webhooks.verify --secret whsec_… \
        --id msg_… --timestamp 1735790000 --signature "v1,…" < body.json
    PYTHONPATH=lambdas .venv/bin/python -m longhaul.webhooks.verify --secret whsec_… \
        --headers delivery.headers.json --body delivery.body      # the headers as received, one JSON object

Exit status 0 (prints the webhook-id: deduplicate by it) or 1 (prints why it was rejected).
"""

from __future__ import annotations

import argparse
import json
import sys

from longhaul.webhooks.signing import (
    ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    TOLERANCE_SECONDS,
    VerificationFailed,
    verify,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="PYTHONPATH=lambdas .venv/bin/python -m longhaul.webhooks.verify", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--secret", action="append", required=True, help="whsec_… (repeat during a rotation)")
    parser.add_argument("--id", help="the webhook-id header")
    parser.add_argument("--timestamp", help="the webhook-timestamp header")
    parser.add_argument("--signature", help="the webhook-signature header")
    parser.add_argument("--headers", help="instead of the three: a file with the received headers as a JSON object")
    parser.add_argument("--body", help="a file with the raw body (default: stdin)")
    parser.add_argument("--tolerance", type=int, default=TOLERANCE_SECONDS, help="seconds (default 300)")
    args = parser.parse_args(argv)
    given = {ID_HEADER: args.id, TIMESTAMP_HEADER: args.timestamp, SIGNATURE_HEADER: args.signature}
    if args.headers:
        with open(args.headers, "rb") as handle:
            received = json.load(handle)
        headers = {str(name).lower(): str(value) for name, value in received.items()}
    elif all(given.values()):
        headers = {name: str(value) for name, value in given.items()}
    else:
        parser.error("give --headers, or all of --id, --timestamp and --signature")
    if args.body:
        with open(args.body, "rb") as handle:
            body = handle.read()
    else:
        body = sys.stdin.buffer.read()
    try:
        webhook_id = verify(body, headers, args.secret, tolerance_seconds=args.tolerance)
    except (VerificationFailed, ValueError) as failed:
        print(f"rejected: {failed}", file=sys.stderr)
        return 1
    print(webhook_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
