; Indentation: the lines inside a bracketed node are indented one level, and the line that
; starts with its closer is not. Each pattern carries the captures of Helix (`@indent` on the
; node, `@outdent` on the closer), Zed (`@indent`, `@end` on the closer) and Neovim
; (`@indent.begin`, `@indent.branch` and `@indent.end` on the closer); each editor ignores the
; captures it does not know.

(_ "{" "}" @outdent @end @indent.branch @indent.end) @indent @indent.begin

(_ "(" ")" @outdent @end @indent.branch @indent.end) @indent @indent.begin

(_ "[" "]" @outdent @end @indent.branch @indent.end) @indent @indent.begin
