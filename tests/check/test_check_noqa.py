from cgkit.check import noqa


def test_line_directives():
    assert noqa.line_directive("x = 1") is None
    assert noqa.line_directive("x.item()  # noqa") == noqa.ALL
    assert noqa.line_directive("x.item()  # NoQA") == noqa.ALL
    assert noqa.line_directive("x.item()  # noqa: CG101") == ("CG101",)
    assert noqa.line_directive("x.item()  #noqa:CG101,CG2 why") == ("CG101", "CG2")
    assert noqa.line_directive("x.item()  # noqa: CG101 CG102") == ("CG101", "CG102")
    # Unparsable lists never widen into a blanket suppression.
    assert noqa.line_directive("x.item()  # noqa: item") == ()
    assert noqa.line_directive("x.item()  # noqa:") == ()
    assert noqa.line_directive("x.item()  # noqa: cg101") == ()
    assert noqa.line_directive("x.item()  # noqanything") is None
    assert noqa.line_directive("# cgkit: noqa") is None  # a file directive, not a line one


def test_file_directives():
    assert noqa.file_directives("import torch\n") == (False, ())
    assert noqa.file_directives("# cgkit: noqa\nimport torch\n") == (True, ())
    assert noqa.file_directives("x = 1\n# cgkit: noqa: CG101, CG4\n") == (False, ("CG101", "CG4"))
    assert noqa.file_directives("# cgkit: noqa: junk\n") == (False, ())
    assert noqa.file_directives("x = 1  # cgkit: noqa\n") == (False, ())  # must be on its own line


def test_prefix_matching():
    assert noqa.matches("CG101", ("CG1",))
    assert noqa.matches("CG101", ("CG101",))
    assert not noqa.matches("CG101", ("CG102",))
    assert not noqa.matches("CG101", ("CG1010",))
