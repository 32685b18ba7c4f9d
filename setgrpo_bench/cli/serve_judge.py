"""``serve-judge``: a local transformers model over the OpenAI protocol."""

from __future__ import annotations

import argparse

from .common import console


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("serve-judge", help="serve a local transformers model over the OpenAI protocol")
    parser.add_argument("path", help="'tiny' or a transformers causal-LM folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model-name", help="name clients must send (default: the folder name)")
    parser.set_defaults(func=_serve_judge)


def _serve_judge(args: argparse.Namespace) -> int:
    from ..judges.serve import make_server

    server = make_server(args.path, host=args.host, port=args.port, model_name=args.model_name)
    host, port = server.server_address[:2]
    console.print(f"serving {args.path} as {server.RequestHandlerClass.model_name!r} at http://{host}:{port}/v1 (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.server_close()
    return 0
