# Turns a file into a C source holding its bytes, at build time:
#   cmake -DIN=page.html -DOUT=page_data.c -DNAME=srv_chat_page -P embed.cmake
# defines `const unsigned char NAME[]` (NUL-terminated) and `const size_t NAME_len`.
# Files such as the chat page stay plain files a person edits, with no escaping.
get_filename_component(name "${IN}" NAME)
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp"
     "/* Generated from ${name} by cmake/embed.cmake: do not edit. */\n#include <stddef.h>\n"
     "const unsigned char ${NAME}[] = {\n${bytes}0x00};\nconst size_t ${NAME}_len = ${n_bytes};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
