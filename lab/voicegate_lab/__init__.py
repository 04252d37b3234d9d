"""The lab: what measures voicegate, apart from what runs it.

``eval`` runs a recorded corpus or a scripted worst-case agent against the gate; ``bench`` times
it, one module per figure; ``cli`` holds their commands, which ``voicegate eval`` and
``voicegate bench`` load from here. The lab imports ``voicegate`` freely; ``voicegate`` imports
the lab only in the command line's hook, so the server's wheel can leave it out.
"""
