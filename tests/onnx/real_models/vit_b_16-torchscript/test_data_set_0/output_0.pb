
BlogitsJ(†Q	æ‰4Xº§ÔóΩâ;æÛOZæû2™>em∆<d@ªı{æŒb,æ