"""Never built: the error cases stop at configure time."""


def f():
    raise NotImplementedError
