"""Factories that fail, for cgkit's bad-input tests."""


def build():
    raise RuntimeError("this factory is broken on purpose")


def example():
    return ()
