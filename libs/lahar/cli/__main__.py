from lahar.cli.main import main

main()
