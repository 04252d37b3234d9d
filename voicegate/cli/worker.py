"""``voicegate worker``: a recogniser worker that hears answers for gates over NATS JetStream.

The hearing is ``voicegate.hearing.worker``; a gate sends its answers there when started with
``voicegate serve --hearing nats://...``. Stops on Ctrl-C or SIGTERM, after the utterance it is
hearing.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from voicegate.errors import ModelError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate worker``."""
    parser.add_argument(
        "--nats", metavar="URL", default="nats://127.0.0.1:4222", help="the NATS server "
        "with JetStream the gates publish to (default nats://127.0.0.1:4222)"
    )  # fmt: skip
    parser.add_argument(
        "--model", default=None, help="tiny.en (default for English) or base (for Hindi); "
        "the gates' --voice-model"
    )  # fmt: skip
    parser.add_argument(
        "--lang",
        action="append",
        choices=("en", "hi"),
        help="languages the gates listen for, to pick the same default model (default en)",
    )
    parser.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="where the recogniser runs (auto: a CUDA GPU when there is one)",
    )


def run(args: argparse.Namespace) -> int:
    """Load the recogniser and hear until stopped; exit 2 when it or NATS cannot be used."""
    from nats.errors import Error as NatsError
    from nats.js.errors import Error as JetStreamError

    from voicegate.hearing.worker import work
    from voicegate.observe import configure_logging
    from voicegate.voice.models import check_languages
    from voicegate.voice.pipeline import default_model
    from voicegate.voice.whisper import FasterWhisperTranscriber

    configure_logging()
    langs = tuple(args.lang or ("en",))
    model = args.model or default_model(langs)
    try:
        check_languages(model, langs)
        transcriber = FasterWhisperTranscriber(model, device=args.device)
    except ModelError as exc:
        print(f"voicegate worker: {exc}", file=sys.stderr)
        return 2

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)

        def ready() -> None:
            print(f"voicegate worker: hearing with {model} on {transcriber.device} for {args.nats}")
            sys.stdout.flush()

        return await work(args.nats, transcriber, stop=stop, ready=ready)

    try:
        heard = asyncio.run(main())
    except (OSError, NatsError, JetStreamError) as exc:
        print(f"voicegate worker: cannot use NATS at {args.nats}: {exc!r}", file=sys.stderr)
        return 2
    print(f"voicegate worker: stopped after {heard} utterances")
    return 0
