
BlogitsJ(ŸQ	¾5X¼§ï—½ˆ;¾ïOZ¾2ª>imÆ<t@»õ{¾Éb,¾