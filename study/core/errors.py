"""The one exception type that reaches the user.

Anything a user can fix (a bad parameter, a missing or corrupt dataset, a model that cannot fit the
image) is raised as :class:`StudyError` with a one-line message naming the problem and the fix. The CLI
prints it as ``error: <message>`` and exits with status 2, without a traceback.
"""


class StudyError(Exception):
    """A problem the user can fix; its message is a single line meant for them."""
