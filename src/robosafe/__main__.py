from robosafe.cli import main

main()
