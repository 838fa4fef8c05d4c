from onthefly.cli import main

raise SystemExit(main())
