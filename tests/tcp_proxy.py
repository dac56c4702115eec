"""A TCP proxy on localhost whose connections a test can cut: a dropped network link."""

import asyncio
import threading


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``target`` (``host:port``) from a thread of its own.

    :meth:`drop` closes every connection open through it and refuses new ones
    for ``seconds``: what a client sees when its link to the scheduler breaks
    for a moment.

    Examples
    --------
    ::

        with TcpProxy("127.0.0.1:8786") as proxy:
            client = Client(proxy.address)
            proxy.drop(2.0)
    """

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self.target = (host.replace("tcp://", ""), int(port))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.writers = set()
        self.refuse_until = 0.0
        self.server = None
        self.drops = 0

    @property
    def address(self):
        return f"tcp://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    def __enter__(self):
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self.loop).result()
        return self

    def __exit__(self, *exc):
        async def stop():
            self.server.close()
            for w in list(self.writers):
                w.close()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)

    async def _serve(self, reader, writer):
        if self.loop.time() < self.refuse_until:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.writers.update((writer, up_writer))

        async def pipe(src, dst):
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.close()
                self.writers.discard(dst)

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def drop(self, seconds=0.0):
        """Cut every connection now, and refuse new ones for ``seconds``."""
        async def cut():
            self.refuse_until = self.loop.time() + seconds
            self.drops += 1
            for w in list(self.writers):
                w.transport.abort()
        asyncio.run_coroutine_threadsafe(cut(), self.loop).result()
