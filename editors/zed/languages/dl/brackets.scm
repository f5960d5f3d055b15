; Bracket pairs Zed matches and colours.
("(" @open ")" @close)
("[" @open "]" @close)
("{" @open "}" @close)
