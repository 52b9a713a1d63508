"""The Wyoming front: Home Assistant's and Rhasspy's protocol (JSON event
lines with raw PCM payloads over TCP), served in-process over the gateway's
own engines, ASR service and session limits.

``server`` owns the listener; ``connection`` one client; ``asr`` and ``tts``
the two request kinds; ``wire`` the framing; ``messages`` the event shapes;
``info`` the describe answer; ``trust`` who may connect; ``zeroconf`` the
optional mDNS announcement.
"""
