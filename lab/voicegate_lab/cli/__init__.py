"""The lab's commands, ``voicegate eval`` and ``voicegate bench``: one module each, loaded by
``voicegate.cli`` only to run."""
