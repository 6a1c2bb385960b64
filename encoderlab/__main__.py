from encoderlab.cli import main

raise SystemExit(main())
