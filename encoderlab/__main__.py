try:
    from encoderlab.cli import main
except KeyboardInterrupt:  # Ctrl-C while starting: no traceback, a shell's 130
    raise SystemExit(130) from None

raise SystemExit(main())
