"""The version of ctxeval (read by the build backend and by ``ctxeval.__version__``)."""

__version__ = "0.1.0.dev0"
