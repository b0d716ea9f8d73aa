"""How the tests run a command the way its entry point does, to read what it refuses."""


def one_line_error(main, argv, capsys) -> str:
    """The error ``main(argv)`` refuses ``argv`` with, asserting exit status 2 (returned, or raised by
    argparse while parsing) and a message of one line on stderr."""
    try:
        code = main(argv)
    except SystemExit as stopped:  # refused while parsing
        code = stopped.code
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1, error
    return error
